"""The wire and transport: capped, deadlined HTTP (`http`), the shapes a reply reads as
(`wire`), a /metrics scrape (`metrics`) and what Ctrl-C does to a request in flight
(`interrupt`). Nothing here knows an engine or a claim."""

"""The run record: what the pytest glue writes and the reports read (`results`)."""

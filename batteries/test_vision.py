"""vision: the model sees the image it is sent, in each image form the endpoint speaks (a
`data:` URL, bare base64 for llama.cpp, an Anthropic image block): one test per form."""

from pytest_frank.claims import battery

globals().update(battery("vision"))

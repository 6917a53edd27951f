"""GPU runs of fimlsp, prepared here: the payload, random-weight models of real shapes,
real middles replayed through the parser, and the one command for the GPU machine."""

"""Reading traces: one source per format (nsys/, ...), all producing the same TraceData."""

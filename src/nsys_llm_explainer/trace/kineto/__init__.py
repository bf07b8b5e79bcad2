"""PyTorch profiler (Kineto) Chrome-trace JSON traces as TraceData (docs/kineto.md)."""

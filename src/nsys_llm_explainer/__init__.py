"""nsys-llm-explain: explain Nsight Systems SQLite exports of LLM inference."""

__version__ = "0.1.0"
TOOL_NAME = "nsys-llm-explain"

__all__ = ["TOOL_NAME", "__version__"]

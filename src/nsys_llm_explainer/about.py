"""The tool's name and version, as every output and the command line state them (the package
exports both: `nsys_llm_explainer.__version__`)."""

__version__ = "0.1.0"
TOOL_NAME = "nsys-llm-explain"

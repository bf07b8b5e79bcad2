"""Understanding kernel names: demangled C++ parsing, what a name is judged by, categories,
math mode (operand type, tensor cores) and the short labels every writer shows."""

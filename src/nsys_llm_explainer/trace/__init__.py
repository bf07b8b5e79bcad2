"""Reading inputs: opening read-only, probing the schema, loading columns, decoding ids."""

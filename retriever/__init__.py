"""Stage 1: the bi-encoder (texts -> vectors) and the vector index (Qdrant) behind one Protocol."""

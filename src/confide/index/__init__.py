"""The index layer: how a memory becomes rows.

A memory is written as a sealed row (:mod:`.codec`), blind lexical tokens of its text
(:mod:`.lexical`, over :mod:`.tokenize` and :mod:`.memory_text`) and, with an embedder, a
vector and relation edges (:mod:`.vectors`). Each indexer prepares its rows outside the
write transaction and writes them inside it, beside the memory row.
"""

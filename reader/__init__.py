"""Stage 2: the span-extraction reader (windows, start/end logits -> scored spans), training and SQuAD eval."""

"""Stage 2: the span-extraction reader (windows, logits -> scored spans), training and SQuAD eval."""

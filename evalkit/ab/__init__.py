"""`evalkit ab`: a baseline and a candidate arm run in stages on the same questions, each cell of a
pre-registered plan stopping at the first group-sequential look that decides it."""

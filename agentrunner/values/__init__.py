"""The values beneath everything: typed records, events, errors, the model and environment
protocols, redaction, hashing. They import nothing else of the project's."""

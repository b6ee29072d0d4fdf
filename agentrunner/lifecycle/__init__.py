"""An episode's lifecycle beyond one run: resume, fork, fan-out, batches and their units,
the decision engine and its reader."""

"""The runtime: the runner, the recorder, the writer's liveness, interrupts, the context
policies and the Ray executor."""

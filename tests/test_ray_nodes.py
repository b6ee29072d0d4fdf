"""A Ray node that leaves mid-batch: its episodes resume on the other node, once each."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ray_episodes import (
    batch_hurt_midway,
    open_store,
)

from agentrunner import EpisodeSummary, TraceStore

pytest.importorskip("ray", reason="Ray is not installed (pip install 'agentrunner[ray]')")
cluster_utils = pytest.importorskip("ray.cluster_utils")

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    """A head that runs no work and two worker nodes of 2 CPUs each (either can take all
    the actors of a batch of concurrency 8 when the other leaves)."""
    with pytest.MonkeyPatch.context() as env:
        env.setenv("AGENTRUNNER_SCRIPTED_PACE", "0")
        nodes = cluster_utils.Cluster(
            initialize_head=True,
            connect=True,
            head_node_args={"num_cpus": 0, "include_dashboard": False},
        )
        for _ in range(2):
            nodes.add_node(num_cpus=2)
    nodes.wait_for_nodes()
    yield nodes
    import ray

    ray.shutdown()
    nodes.shutdown()


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[TraceStore]:
    yield from open_store(request, tmp_path)


def _parent_pid(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat[stat.rindex(")") + 2 :].split()[1])


def _node_of(cluster: Any, worker_pid: int) -> Any:
    """The node whose raylet started the worker process ``worker_pid``."""
    raylet = _parent_pid(worker_pid)
    (node,) = [
        n for n in cluster.worker_nodes if n.all_processes["raylet"][0].process.pid == raylet
    ]
    return node


@pytest.mark.parametrize("graceful", [True, False], ids=["graceful", "ungraceful"])
def test_episodes_of_a_removed_node_resume_on_the_other_node_and_complete_once(
    cluster: Any, store: TraceStore, tmp_path: Path, graceful: bool
) -> None:
    """Removed with its processes stopped (graceful) or killed (ungraceful, as a machine
    that loses its power): the other node has room for every actor."""

    def remove_its_node(victim: EpisodeSummary) -> None:
        node = _node_of(cluster, victim.writer_pid or os.getpid())
        cluster.remove_node(node, allow_graceful=graceful)

    try:
        batch_hurt_midway(store, tmp_path, remove_its_node)
    finally:
        cluster.add_node(num_cpus=2)  # for the next test

"""The recorder for other agents: a loopback proxy in front of any OpenAI- or Anthropic-API client.

Raw API traffic goes through :mod:`~agentrunner.record.proxy` (it only moves bytes and hands
them on), is read by a dialect per wire API (:mod:`~agentrunner.record.dialects`), grouped into
conversations (:mod:`~agentrunner.record.conversations`) and appended to the same event log as
the runner's by one writer thread (:mod:`~agentrunner.record.journal`). ``agentrunner record --
COMMAND`` runs an agent with its clients pointed at the proxy (:mod:`~agentrunner.record.launch`).
"""

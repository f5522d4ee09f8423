//! drover-agent: the cluster side of drover (skeleton; the pipeline lands with the agent issue).

package tracing

// TEMPORARY: the relay's export lands with the new batcher.

"""Use cases: wire the imperative shell (adapters) to the pure core; return results, never print."""

"""gojax: exact, batched Go rules in JAX."""

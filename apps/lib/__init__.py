"""Model-free helpers shared by the apps (no model imports here)."""

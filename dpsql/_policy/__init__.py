"""The data owner's settings: policy files, defaults, the engine setting, units, links."""

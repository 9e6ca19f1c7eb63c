"""Built-in components. Each module is a plugin: module classes, their configs, and one hookimpl."""

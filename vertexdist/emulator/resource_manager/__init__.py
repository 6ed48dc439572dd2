"""The emulated Resource Manager: `projects.get`, so clients that check a project's number find one."""

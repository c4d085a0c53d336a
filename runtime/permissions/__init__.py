"""Permission rules, requests and decisions (OpenCode's PermissionNext, with its traps fixed)."""

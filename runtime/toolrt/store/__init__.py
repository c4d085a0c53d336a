"""Where state that outlives a call is kept (empty until the state store lands)."""

"""Events (issue 17): every invoice transition as a typed event, the owners' endpoints that
receive them, and the events list, redelivery and test ping."""

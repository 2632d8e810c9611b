"""Values that cross the wire: Kubernetes' and Go's formats, request options and
Status errors. No state, no I/O; the lowest layer."""

"""Controllers the server runs itself, as kube-controller-manager runs them for
kube-apiserver: the namespace controller (empties a terminating namespace, then lets it
go) and the garbage collector (deletes or orphans the dependents of deleted owners). They
are loops over the same watch caches and object stores the HTTP handlers use."""

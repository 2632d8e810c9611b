"""Stripped etcd v3.5 protobuf definitions and their generated Python modules."""

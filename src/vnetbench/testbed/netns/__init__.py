"""The embedded backend: hosts and VMs as network namespaces on this machine."""

"""The libvirt backend: QEMU/KVM guests through libvirt-python."""

"""The openstack backend: Heat stacks of pinned VM pairs through openstacksdk."""

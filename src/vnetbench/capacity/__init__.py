"""From measurements to data-centre design (issue 28, seed 004): a capacity profile of
each vSwitch kind per host (``profile``), the planner's input files (``files``), two
placements of a workload -- network-agnostic and network-aware -- with each host's
predicted vSwitch load (``place``, ``planner``), the plan built and measured on the
embedded testbed (``verify``), and the profile handed to OpenStack (``openstack``)."""

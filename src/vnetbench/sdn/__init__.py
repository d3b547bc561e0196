"""Controller applications the suite ships (os-ken) and the glue that runs them."""

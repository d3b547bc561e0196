"""In which os-ken dispatcher states the apps hear a switch's messages (docs/sdn.md).

os-ken's own OpenFlow 1.3 handshake asks for the port description, and handling that
reply is what moves the switch from CONFIG to MAIN: the reply always arrives in CONFIG.
The apps take their ports from it instead of asking again and listening in MAIN only,
which lost the second reply whenever both were read from the socket in one go (the
bridge was then never programmed). What the apps' own messages cause afterwards
(barrier replies, packet-ins of the pipeline they installed) may still arrive before
os-ken's handler of that reply has run, so it is heard in both states.
"""

from os_ken.controller.handler import CONFIG_DISPATCHER, MAIN_DISPATCHER

PORT_DESC = CONFIG_DISPATCHER
AFTER_PORT_DESC = [CONFIG_DISPATCHER, MAIN_DISPATCHER]

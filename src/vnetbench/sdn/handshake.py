"""In which os-ken dispatcher states the apps hear a switch's messages (docs/sdn.md).

os-ken's own OpenFlow 1.3 handshake asks for the port description, and handling that
reply is what moves the switch from CONFIG to MAIN: the reply always arrives in CONFIG.
The apps take their ports from it instead of asking again and listening in MAIN only,
which lost the second reply whenever both were read from the socket in one go (the
bridge was then never programmed). What arrives right after that reply (barrier
replies and packet-ins of the pipeline the apps installed, a port the switch added
meanwhile) may be read in the same go, before os-ken's handler of the reply has run, so
it is heard in both states.
"""

from os_ken.controller.handler import CONFIG_DISPATCHER, MAIN_DISPATCHER

PORT_DESC = CONFIG_DISPATCHER
AFTER_PORT_DESC = [CONFIG_DISPATCHER, MAIN_DISPATCHER]

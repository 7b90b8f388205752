// Command bridge is the agent protocol bridge: a gateway that lets any
// client reach any agent in whichever protocol each side speaks.
//
//	bridge serve    run the gateway (from flags or a YAML config)
//	bridge agent    run the built-in reference agent
//	bridge demo     reference agent and gateway in one process
//	bridge call     a terminal client that streams an agent's reply
//	bridge validate check a config file without serving
package main

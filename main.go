// Command webhookd is a single-binary outbound webhook service. (being written)
package main

func main() {}

// Package testkit is what bondd's tests share and no product code uses: a
// goroutine leak check in the manner of wireguard-go's goroutineLeakCheck
// ([CheckLeaks]), a log sink safe for concurrent use ([SyncBuffer]),
// polling for a condition with a deadline ([WaitFor], for tests that wait
// for what they count rather than sleep), a UDP echo ([UDPEcho]) and a
// wall-clock step ([StepWall]).
package testkit

#include "textflag.h"

// func Line(addr uintptr)
TEXT ·Line(SB), NOSPLIT|NOFRAME, $0-8
	MOVD addr+0(FP), R0
	PRFM (R0), PLDL1KEEP
	RET

// func Lines(addr uintptr, n int)
TEXT ·Lines(SB), NOSPLIT|NOFRAME, $0-16
	MOVD addr+0(FP), R0
	MOVD n+8(FP), R1
	CMP $0, R1
	BLE done
loop:
	PRFM (R0), PLDL1KEEP
	ADD $64, R0
	SUB $1, R1
	CBNZ R1, loop
done:
	RET

//go:build !purego

#include "textflag.h"

// func dotRowsSIMD(q, rows *int8, n, stride, count int, out *int32)
//
// For each of count rows, stride bytes apart: sixteen codes of q and of
// the row are sign-extended to 16-bit words (VPMOVSXBW), multiplied and
// summed in pairs into eight 32-bit lanes (VPMADDWD: at most 2*128*128,
// no overflow), and the lanes accumulated, two accumulators taking 32
// codes a step; the lanes' sum is stored to out, and out moves on by one.
TEXT ·dotRowsSIMD(SB), NOSPLIT, $0-48
	MOVQ q+0(FP), SI
	MOVQ rows+8(FP), DI
	MOVQ n+16(FP), CX
	MOVQ stride+24(FP), DX
	MOVQ count+32(FP), R8
	MOVQ out+40(FP), R9

row:
	VPXOR Y0, Y0, Y0
	VPXOR Y5, Y5, Y5
	XORQ  AX, AX

rloop32:
	LEAQ      32(AX), BX
	CMPQ      BX, CX
	JGT       rtail16
	VPMOVSXBW (SI)(AX*1), Y1
	VPMOVSXBW (DI)(AX*1), Y2
	VPMADDWD  Y1, Y2, Y2
	VPADDD    Y2, Y0, Y0
	VPMOVSXBW 16(SI)(AX*1), Y3
	VPMOVSXBW 16(DI)(AX*1), Y4
	VPMADDWD  Y3, Y4, Y4
	VPADDD    Y4, Y5, Y5
	MOVQ      BX, AX
	JMP       rloop32

rtail16:
	CMPQ      AX, CX
	JGE       rsum
	VPMOVSXBW (SI)(AX*1), Y1
	VPMOVSXBW (DI)(AX*1), Y2
	VPMADDWD  Y1, Y2, Y2
	VPADDD    Y2, Y0, Y0

rsum:
	VPADDD       Y5, Y0, Y0
	VEXTRACTI128 $1, Y0, X1
	VPADDD       X1, X0, X0
	VPSHUFD      $0x4e, X0, X1
	VPADDD       X1, X0, X0
	VPSHUFD      $0xb1, X0, X1
	VPADDD       X1, X0, X0
	VMOVD        X0, (R9)
	ADDQ         $4, R9
	ADDQ         DX, DI
	DECQ         R8
	JNZ          row
	VZEROUPPER
	RET

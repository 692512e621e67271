//! A small typed assembler for eBPF (the kernel's
//! `Documentation/bpf/standardization/instruction-set.rst`): named
//! registers, sizes, operations and helpers; forward jumps to labels that
//! are resolved by [`Assembler::finish`]. It emits instructions one to one
//! (`ld_map_fd` emits the two-slot 64-bit immediate load); what the
//! program means is left to its author and to the kernel's verifier.

use std::fmt;

use crate::sys::bpf::RawInsn;

/// One eBPF instruction (`struct bpf_insn`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Insn(pub(crate) RawInsn);

impl Insn {
    /// The opcode octet.
    pub fn code(&self) -> u8 {
        self.0.code
    }

    /// The immediate.
    pub fn imm(&self) -> i32 {
        self.0.imm
    }

    /// The offset field.
    pub fn off(&self) -> i16 {
        self.0.off
    }
}

impl fmt::Debug for Insn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let r = self.0;
        write!(
            f,
            "{:02x} dst=r{} src=r{} off={} imm={}",
            r.code,
            r.regs & 0x0f,
            r.regs >> 4,
            r.off,
            r.imm
        )
    }
}

/// A register: r0 (return value, helper results), r1-r5 (arguments,
/// clobbered by calls), r6-r9 (kept across calls), r10 (frame pointer,
/// read-only).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reg(pub u8);

impl Reg {
    /// Return value and helper results.
    pub const R0: Reg = Reg(0);
    /// First argument; the context (`struct __sk_buff *`) at entry.
    pub const R1: Reg = Reg(1);
    /// Second argument.
    pub const R2: Reg = Reg(2);
    /// Third argument.
    pub const R3: Reg = Reg(3);
    /// Fourth argument.
    pub const R4: Reg = Reg(4);
    /// Fifth argument.
    pub const R5: Reg = Reg(5);
    /// Callee-saved.
    pub const R6: Reg = Reg(6);
    /// Callee-saved.
    pub const R7: Reg = Reg(7);
    /// Callee-saved.
    pub const R8: Reg = Reg(8);
    /// Callee-saved.
    pub const R9: Reg = Reg(9);
    /// The read-only frame pointer (512 octets of stack below it).
    pub const FP: Reg = Reg(10);
}

/// An access size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Size {
    /// 8 bits (`BPF_B`).
    B,
    /// 16 bits (`BPF_H`).
    H,
    /// 32 bits (`BPF_W`).
    W,
    /// 64 bits (`BPF_DW`).
    DW,
}

impl Size {
    fn bits(self) -> u8 {
        match self {
            Size::W => 0x00,
            Size::H => 0x08,
            Size::B => 0x10,
            Size::DW => 0x18,
        }
    }
}

/// An arithmetic operation (`BPF_ALU` / `BPF_ALU64` op field).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AluOp(pub u8);

impl AluOp {
    /// `dst += src`.
    pub const ADD: AluOp = AluOp(0x00);
    /// `dst -= src`.
    pub const SUB: AluOp = AluOp(0x10);
    /// `*`.
    pub const MUL: AluOp = AluOp(0x20);
    /// `dst |= src`.
    pub const OR: AluOp = AluOp(0x40);
    /// `dst &= src`.
    pub const AND: AluOp = AluOp(0x50);
    /// `dst <<= src`.
    pub const LSH: AluOp = AluOp(0x60);
    /// `dst >>= src` (logical).
    pub const RSH: AluOp = AluOp(0x70);
    /// `dst %= src` (unsigned; by zero leaves `dst` as it was).
    pub const MOD: AluOp = AluOp(0x90);
    /// `dst ^= src`.
    pub const XOR: AluOp = AluOp(0xa0);
    /// `dst = src`.
    pub const MOV: AluOp = AluOp(0xb0);
}

/// A conditional jump (`BPF_JMP` op field), unsigned unless named signed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JmpOp(pub u8);

impl JmpOp {
    /// `==`.
    pub const JEQ: JmpOp = JmpOp(0x10);
    /// `>`.
    pub const JGT: JmpOp = JmpOp(0x20);
    /// `>=`.
    pub const JGE: JmpOp = JmpOp(0x30);
    /// `dst & src != 0`.
    pub const JSET: JmpOp = JmpOp(0x40);
    /// `!=`.
    pub const JNE: JmpOp = JmpOp(0x50);
    /// `<`.
    pub const JLT: JmpOp = JmpOp(0xa0);
    /// `<=`.
    pub const JLE: JmpOp = JmpOp(0xb0);
}

/// A helper function number (`enum bpf_func_id`, linux/bpf.h).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Helper(pub i32);

impl Helper {
    /// `void *bpf_map_lookup_elem(map, key)`: the value, or NULL.
    pub const MAP_LOOKUP_ELEM: Helper = Helper(1);
    /// `long bpf_skb_load_bytes(skb, offset, to, len)`: copies `len`
    /// packet octets from `offset` to `to` (the stack); 0, or negative
    /// when the packet is shorter.
    pub const SKB_LOAD_BYTES: Helper = Helper(26);
}

/// Instruction classes.
mod class {
    pub(super) const LD: u8 = 0x00;
    pub(super) const LDX: u8 = 0x01;
    pub(super) const ST: u8 = 0x02;
    pub(super) const STX: u8 = 0x03;
    pub(super) const ALU: u8 = 0x04;
    pub(super) const JMP: u8 = 0x05;
    pub(super) const JMP32: u8 = 0x06;
    pub(super) const ALU64: u8 = 0x07;
}

/// Modes of the load and store classes.
mod mode {
    pub(super) const IMM: u8 = 0x00;
    pub(super) const ABS: u8 = 0x20;
    pub(super) const IND: u8 = 0x40;
    pub(super) const MEM: u8 = 0x60;
    pub(super) const ATOMIC: u8 = 0xc0;
}

/// Source operand: the immediate (`BPF_K`) or the source register (`BPF_X`).
const SRC_K: u8 = 0x00;
const SRC_X: u8 = 0x08;
/// `BPF_END | BPF_TO_BE` of the ALU class: byte swap on little-endian
/// hosts.
const END_TO_BE: u8 = 0xd0 | 0x08;
/// `BPF_JA`, `BPF_CALL`, `BPF_EXIT` of the jump class.
const JA: u8 = 0x00;
const CALL: u8 = 0x80;
const EXIT: u8 = 0x90;
/// `BPF_PSEUDO_MAP_FD`: the 64-bit immediate is a map descriptor.
const PSEUDO_MAP_FD: u8 = 1;

/// A jump target, bound once with [`Assembler::bind`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Label(usize);

/// Why a program could not be assembled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AsmError {
    /// A label was jumped to but never bound.
    Unbound(usize),
    /// A jump is longer than the 16-bit offset allows.
    TooFar,
}

impl fmt::Display for AsmError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AsmError::Unbound(label) => write!(f, "label {label} is never bound"),
            AsmError::TooFar => f.write_str("a jump does not fit its 16-bit offset"),
        }
    }
}

impl std::error::Error for AsmError {}

/// Builds a program. See the module docs.
#[derive(Debug, Default)]
pub struct Assembler {
    insns: Vec<RawInsn>,
    /// Instruction index of each label, once bound.
    labels: Vec<Option<usize>>,
    /// (instruction index, label) of each jump to patch.
    fixups: Vec<(usize, Label)>,
}

impl Assembler {
    /// An empty program.
    pub fn new() -> Self {
        Self::default()
    }

    fn emit(&mut self, code: u8, dst: Reg, src: Reg, off: i16, imm: i32) -> &mut Self {
        self.insns.push(RawInsn {
            code,
            regs: (dst.0 & 0x0f) | (src.0 << 4),
            off,
            imm,
        });
        self
    }

    /// A new, unbound label.
    pub fn label(&mut self) -> Label {
        self.labels.push(None);
        Label(self.labels.len() - 1)
    }

    /// The next instruction is `label`'s target.
    pub fn bind(&mut self, label: Label) -> &mut Self {
        self.labels[label.0] = Some(self.insns.len());
        self
    }

    /// 64-bit `dst op= imm`.
    pub fn alu64_imm(&mut self, op: AluOp, dst: Reg, imm: i32) -> &mut Self {
        self.emit(class::ALU64 | op.0 | SRC_K, dst, Reg(0), 0, imm)
    }

    /// 64-bit `dst op= src`.
    pub fn alu64_reg(&mut self, op: AluOp, dst: Reg, src: Reg) -> &mut Self {
        self.emit(class::ALU64 | op.0 | SRC_X, dst, src, 0, 0)
    }

    /// 32-bit `dst op= imm` (the upper half of `dst` becomes 0).
    pub fn alu32_imm(&mut self, op: AluOp, dst: Reg, imm: i32) -> &mut Self {
        self.emit(class::ALU | op.0 | SRC_K, dst, Reg(0), 0, imm)
    }

    /// 32-bit `dst op= src` (the upper half of `dst` becomes 0).
    pub fn alu32_reg(&mut self, op: AluOp, dst: Reg, src: Reg) -> &mut Self {
        self.emit(class::ALU | op.0 | SRC_X, dst, src, 0, 0)
    }

    /// `dst = src` (64-bit).
    pub fn mov(&mut self, dst: Reg, src: Reg) -> &mut Self {
        self.alu64_reg(AluOp::MOV, dst, src)
    }

    /// `dst = imm` (64-bit, sign-extended).
    pub fn mov_imm(&mut self, dst: Reg, imm: i32) -> &mut Self {
        self.alu64_imm(AluOp::MOV, dst, imm)
    }

    /// `dst = hton(dst)` of its low `bits` (16, 32 or 64), upper bits
    /// cleared: network order read from memory becomes the number.
    pub fn to_be(&mut self, dst: Reg, bits: i32) -> &mut Self {
        self.emit(class::ALU | END_TO_BE, dst, Reg(0), 0, bits)
    }

    /// Legacy packet load `r0 = ntoh(*(size *)(skb->data + off))`; needs
    /// r6 = the context. Past the packet's end the program returns 0.
    pub fn ld_abs(&mut self, size: Size, off: i32) -> &mut Self {
        self.emit(class::LD | mode::ABS | size.bits(), Reg(0), Reg(0), 0, off)
    }

    /// Legacy packet load `r0 = ntoh(*(size *)(skb->data + src + off))`;
    /// as [`ld_abs`](Self::ld_abs).
    pub fn ld_ind(&mut self, size: Size, src: Reg, off: i32) -> &mut Self {
        self.emit(class::LD | mode::IND | size.bits(), Reg(0), src, 0, off)
    }

    /// `dst = *(size *)(src + off)`.
    pub fn load(&mut self, size: Size, dst: Reg, src: Reg, off: i16) -> &mut Self {
        self.emit(class::LDX | mode::MEM | size.bits(), dst, src, off, 0)
    }

    /// `*(size *)(dst + off) = src`.
    pub fn store(&mut self, size: Size, dst: Reg, off: i16, src: Reg) -> &mut Self {
        self.emit(class::STX | mode::MEM | size.bits(), dst, src, off, 0)
    }

    /// `*(size *)(dst + off) = imm`.
    pub fn store_imm(&mut self, size: Size, dst: Reg, off: i16, imm: i32) -> &mut Self {
        self.emit(class::ST | mode::MEM | size.bits(), dst, Reg(0), off, imm)
    }

    /// Atomic `*(u64 *)(dst + off) += src` (`BPF_ATOMIC | BPF_ADD`).
    pub fn atomic_add64(&mut self, dst: Reg, off: i16, src: Reg) -> &mut Self {
        let add = i32::from(AluOp::ADD.0);
        self.emit(
            class::STX | mode::ATOMIC | Size::DW.bits(),
            dst,
            src,
            off,
            add,
        )
    }

    /// `dst = map` (the two-slot `BPF_LD | BPF_DW | BPF_IMM` with
    /// `BPF_PSEUDO_MAP_FD`; the kernel swaps the descriptor for the map).
    pub fn ld_map_fd(&mut self, dst: Reg, map_fd: i32) -> &mut Self {
        self.emit(
            class::LD | mode::IMM | Size::DW.bits(),
            dst,
            Reg(PSEUDO_MAP_FD),
            0,
            map_fd,
        );
        self.emit(0, Reg(0), Reg(0), 0, 0)
    }

    /// Calls `helper` (arguments in r1-r5, result in r0).
    pub fn call(&mut self, helper: Helper) -> &mut Self {
        self.emit(class::JMP | CALL, Reg(0), Reg(0), 0, helper.0)
    }

    /// Returns r0.
    pub fn exit(&mut self) -> &mut Self {
        self.emit(class::JMP | EXIT, Reg(0), Reg(0), 0, 0)
    }

    /// `if dst op imm goto target` (64-bit compare).
    pub fn jump_imm(&mut self, op: JmpOp, dst: Reg, imm: i32, target: Label) -> &mut Self {
        self.fixups.push((self.insns.len(), target));
        self.emit(class::JMP | op.0 | SRC_K, dst, Reg(0), 0, imm)
    }

    /// `if (u32)dst op (u32)imm goto target` (`BPF_JMP32`: the immediate
    /// is not sign-extended, so any 32-bit value compares as written).
    pub fn jump32_imm(&mut self, op: JmpOp, dst: Reg, imm: u32, target: Label) -> &mut Self {
        self.fixups.push((self.insns.len(), target));
        self.emit(
            class::JMP32 | op.0 | SRC_K,
            dst,
            Reg(0),
            0,
            i32::from_ne_bytes(imm.to_ne_bytes()),
        )
    }

    /// `if dst op src goto target` (64-bit compare).
    pub fn jump_reg(&mut self, op: JmpOp, dst: Reg, src: Reg, target: Label) -> &mut Self {
        self.fixups.push((self.insns.len(), target));
        self.emit(class::JMP | op.0 | SRC_X, dst, src, 0, 0)
    }

    /// `goto target`.
    pub fn jump(&mut self, target: Label) -> &mut Self {
        self.fixups.push((self.insns.len(), target));
        self.emit(class::JMP | JA, Reg(0), Reg(0), 0, 0)
    }

    /// The program with every jump resolved.
    pub fn finish(&self) -> Result<Vec<Insn>, AsmError> {
        let mut insns = self.insns.clone();
        for &(at, label) in &self.fixups {
            let target = self.labels[label.0].ok_or(AsmError::Unbound(label.0))?;
            // Offsets count from the instruction after the jump.
            let off = target as i64 - at as i64 - 1;
            insns[at].off = i16::try_from(off).map_err(|_| AsmError::TooFar)?;
        }
        Ok(insns.into_iter().map(Insn).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodings_match_the_instruction_set() {
        let mut asm = Assembler::new();
        let done = asm.label();
        asm.mov(Reg::R6, Reg::R1)
            .ld_abs(Size::H, 12)
            .jump_imm(JmpOp::JNE, Reg::R0, 0x0800, done)
            .ld_ind(Size::W, Reg::R7, 4)
            .jump32_imm(JmpOp::JNE, Reg::R0, 0xc0a8_0001, done)
            .atomic_add64(Reg::R0, 16, Reg::R1)
            .bind(done)
            .mov_imm(Reg::R0, -1)
            .exit();
        let insns = asm.finish().unwrap();
        let codes: Vec<u8> = insns.iter().map(Insn::code).collect();
        // mov64 x, ldabs h, jne k, ldind w, jne32 k, atomic dw, mov64 k, exit.
        assert_eq!(codes, [0xbf, 0x28, 0x55, 0x40, 0x56, 0xdb, 0xb7, 0x95]);
        assert_eq!(insns[0].0.regs, 0x16, "dst r6 low nibble, src r1 high");
        assert_eq!(insns[2].off(), 3, "skips the three instructions after it");
        assert_eq!(insns[3].0.regs, 0x70);
        assert_eq!(insns[4].imm() as u32, 0xc0a8_0001);
        assert_eq!(insns[6].imm(), -1);
    }

    #[test]
    fn byte_swap_is_end_to_be_of_the_alu_class() {
        let mut asm = Assembler::new();
        asm.to_be(Reg::R9, 32).to_be(Reg::R8, 16);
        let insns = asm.finish().unwrap();
        // BPF_ALU | BPF_END | BPF_TO_BE, the width in imm.
        assert_eq!(insns[0].code(), 0xdc);
        assert_eq!((insns[0].0.regs, insns[0].imm()), (0x09, 32));
        assert_eq!((insns[1].0.regs, insns[1].imm()), (0x08, 16));
    }

    #[test]
    fn map_loads_take_two_slots_and_labels_must_be_bound() {
        let mut asm = Assembler::new();
        asm.ld_map_fd(Reg::R1, 7);
        let insns = asm.finish().unwrap();
        assert_eq!(insns.len(), 2);
        assert_eq!(
            (insns[0].code(), insns[0].0.regs, insns[0].imm()),
            (0x18, 0x11, 7)
        );
        let mut asm = Assembler::new();
        let nowhere = asm.label();
        asm.jump(nowhere);
        assert_eq!(asm.finish(), Err(AsmError::Unbound(0)));
    }
}

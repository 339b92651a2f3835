//! A streamed answer: what the pump makes of it as it arrives ([`read`]),
//! how its end settles the attempt ([`end`]), and what is written when it
//! ends or its pump is gone ([`finish`]).

pub mod end;
pub mod finish;
pub mod read;

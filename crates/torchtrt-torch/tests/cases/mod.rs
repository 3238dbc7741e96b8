mod archives;
mod data;
mod programs;

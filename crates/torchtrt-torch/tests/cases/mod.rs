mod archives;
mod data;
mod docs;
mod programs;

//! Test support beyond `common`: the scripted chat server.
#![allow(dead_code)]

pub mod chat_server;

//! tradedesk's tools: plain functions over a book and a [`ToolContext`], served by every
//! transport through the [`registry`].

pub mod accounts;
pub mod args;
pub mod bar_table;
pub mod bars;
pub mod chain;
pub mod config;
pub mod context;
pub mod docs;
pub mod health;
pub mod history;
pub mod hours;
pub mod journal;
pub mod market;
pub mod marketdata;
pub mod merge;
pub mod news;
pub mod num;
pub mod options;
pub mod performance;
pub mod perps;
pub mod positions;
pub mod rates;
pub mod realized;
pub mod registry;
pub mod research;
pub mod schema;
pub mod search;
pub mod select;
pub mod snapshots;
pub mod tool;
pub mod toolset;
pub mod trading;
pub mod unavailable;
pub mod valuation;

pub use context::ToolContext;
pub use registry::{CallError, ToolSpec, call, call_with, call_with_progress, listed, tools};
pub use tool::{Call, Meta, Tool, ToolOutput};
pub use toolset::{Toolset, Toolsets};

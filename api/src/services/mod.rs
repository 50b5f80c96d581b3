//! The changes of the resources whose writes take more than one statement: each function
//! runs one change in one transaction (its checks of referenced ids, its effects, its event)
//! and returns what the API answers. The rules themselves live in `parley_domain`; SQL lives
//! in `parley_db`; the route handlers parse, authorize, call one of these, and answer.

pub mod conversations;
pub mod tickets;
